"""N-gram language models of reference text: ``tokenmill lm train`` (``train.py``) and the queries the
``perplexity`` curation step makes (``model.py``)."""
