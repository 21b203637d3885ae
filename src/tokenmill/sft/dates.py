"""The day chat templates that stamp the current time (``strftime_now``) are rendered at, unless the ``date``
option says another: a module of its own, so that the template (sft/template.py) and the options
(sft/options.py) both read it without importing each other."""

DEFAULT_DATE = "2025-01-01"
