"""The Scrapy side of hostcrawl: spider, settings, politeness, WARC and text sinks, runs and the CLI."""

__version__ = "0.1.0"
