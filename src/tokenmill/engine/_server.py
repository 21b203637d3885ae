"""The one module a run's fork server imports as it starts (its only tokenmill preload module, named by
:func:`tokenmill.engine.warm.guard_forkserver`): guard, import, build, warm, freeze (:func:`~tokenmill.engine.warm.serve`)."""

from tokenmill.engine.warm import serve

DONE = serve()  # what the processes this server forks inherit done (read by the tests)
