"""Running a crawl: its config and Scrapy settings, the run directory (start, resume, finish, stats,
report), distributed workers and their merge, frontier commands, recrawl plans as seeds."""
