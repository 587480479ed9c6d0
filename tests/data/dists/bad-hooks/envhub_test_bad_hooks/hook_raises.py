from envhub import hookimpl


@hookimpl
def envhub_executors():
    return []


@hookimpl
def envhub_policies():
    raise KeyError("settings")
