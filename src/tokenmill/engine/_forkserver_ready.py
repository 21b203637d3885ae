"""Imported only by the multiprocessing fork server, as the last of its preload modules (see
:func:`tokenmill.engine.workers.preload_in_forkserver`): everything the server holds by now (the imported
modules, a prebuilt encoder) lives as long as the processes it forks, so it is moved out of the garbage
collector's sight (``gc.freeze``). A worker's full collections then never walk those objects, nor write to
the pages it shares with the server (each write would copy a page): 6% of an SFT worker's CPU
(BENCHMARKS.md, "Round 8")."""

import gc

gc.freeze()
