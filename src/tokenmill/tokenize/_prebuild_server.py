"""Imported only by the multiprocessing fork server, as one of its preload modules (see
:mod:`tokenmill.tokenize.prebuild`): builds the fast encoder the driver named in the environment."""

from tokenmill.tokenize.prebuild import build_from_environment

build_from_environment()
