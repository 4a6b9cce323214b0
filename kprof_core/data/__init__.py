"""Layer 2, the profile's data: the columnar tables and record views, summaries, provenance and ``ProfileData``, below everything that reads them."""
