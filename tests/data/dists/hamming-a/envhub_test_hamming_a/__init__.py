from envhub import hookimpl
from envhub.hookspecs import RegistryBackend, VerifierKind


def factory(options, ctx, factories):
    raise AssertionError("a kind in conflict is never built")


@hookimpl
def envhub_verifier_kinds():
    return [VerifierKind("hamming", factory)]


@hookimpl
def envhub_registry_backends():
    return [RegistryBackend("dup", lambda url, settings: None)]
