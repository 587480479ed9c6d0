from envhub import hookimpl


@hookimpl
def envhub_verifer_kinds():  # misspelt
    return []
