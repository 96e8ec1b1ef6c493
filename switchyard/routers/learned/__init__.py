"""Learned routers: the prefill-residual probe and the embedding kNN baseline.

Layer: ``routers`` — imports ``protocol`` only; numpy lazily.
"""
