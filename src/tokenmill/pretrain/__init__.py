"""The pretraining track: documents in, a plain token stream out (every token trained, EOS after each)."""

from tokenmill.io.documents import to_documents
from tokenmill.pretrain.run import PretrainTask, run_pretrain

__all__ = ["PretrainTask", "run_pretrain", "to_documents"]
