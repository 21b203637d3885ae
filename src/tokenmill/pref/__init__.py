"""The preference track (``tokenmill pref``): DPO/KTO/reward pairs into token shards, tokenized as TRL tokenizes
them, the prompt stored once per pair. See docs/preference.md."""
