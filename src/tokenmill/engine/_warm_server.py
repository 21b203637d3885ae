"""Imported only by the multiprocessing fork server, as its last preload module (see
:mod:`tokenmill.engine.warm`): warms the steps the driver named in the environment."""

from tokenmill.engine.warm import warm_from_environment

WARMED = warm_from_environment()  # what the workers this server forks inherit loaded (read by the tests)
