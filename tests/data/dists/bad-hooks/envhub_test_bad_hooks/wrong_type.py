from envhub import hookimpl


@hookimpl
def envhub_verifier_kinds():
    return {"name": "dict-not-list"}
