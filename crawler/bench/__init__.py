"""The harness, never imported by a crawl: `hostcrawl bench` and `demo`, the replay simulator and
its scores, the server-side politeness audit."""
