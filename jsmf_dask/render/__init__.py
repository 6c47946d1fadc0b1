"""Rendering of results: matplotlib figures (Agg backend, PNG bytes) and the self-contained HTML report."""
