"""The SDK certification matrix (``certification.matrix``); ``python -m certification`` runs it."""
