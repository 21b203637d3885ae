"""Synthetic data through an OpenAI-compatible inference server: rephrasing documents (WRAP) for the
pretraining track, distilling a teacher's reasoning traces for the SFT track."""
