# pyarrow.compute builds most of its functions at import time from the C++ function registry
# (pyarrow/compute.py `_make_global_functions`), so a static checker sees none of them. This partial
# stub types every name of the module as Any instead of reporting each use as unknown.
from typing import Any

def __getattr__(name: str) -> Any: ...
