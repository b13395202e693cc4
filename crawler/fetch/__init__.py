"""The fetch path: the spider and the downloader middlewares and extensions a request passes
(addresses, robots.txt, politeness, page directives and TDMRep, routing, limits, failures, shutdown)."""
