"""Training and evaluating learned routers (``switchyard train-probe``).

Layer: ``probe`` — above ``eval`` (its dataset reader and metrics), below ``cli``. Serving lives
in :mod:`switchyard.routers.learned`; feature extraction in :mod:`switchyard.features`.
"""
