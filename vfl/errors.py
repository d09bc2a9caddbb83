"""The one error type users see: a single line that names the fix. The CLI prints it and exits 2."""


class SplitlabError(ValueError):
    """Bad input from the user (unknown name, missing files, incompatible shapes, corrupt checkpoint)."""
