# hostcrawl's image: the crawler, the test web and the distributed worker mode (the `redis` extra).
# Build with the GPU cleaners too: docker build --build-arg EXTRAS=redis,gpu .
FROM python:3.11-slim-bookworm
ARG EXTRAS=redis
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /opt/hostcrawl
COPY pyproject.toml requirements.lock README.md ./
COPY crawler crawler
COPY scheduler scheduler
COPY cleaner cleaner
COPY graph graph
COPY analytics analytics
# the lock pins every package; torch (the gpu extra) is not in it and comes from PyPI with CUDA
RUN pip install -c requirements.lock ".[${EXTRAS}]"
# crawl as an ordinary user; run directories live on the /runs volume
RUN useradd --create-home --uid 1000 crawler && mkdir /runs && chown crawler /runs
USER crawler
WORKDIR /runs
ENTRYPOINT ["hostcrawl"]
CMD ["--help"]
