"""The error every config check raises (:mod:`labeldp.config`, :mod:`labeldp.plan`, :mod:`labeldp.variants`)."""


class ConfigError(ValueError):
    """A config value is invalid; the message names the key and the fix."""
