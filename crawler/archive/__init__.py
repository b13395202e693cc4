"""The archive: WARC writing and reading back (responses, revisits, metadata), CDXJ indexes, and
scoring WARC files offline (`hostcrawl score`)."""
