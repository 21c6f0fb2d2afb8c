# The Task Executor worker: `python -m chalicelib.worker`, a long-lived process (Fargate,
# and the `worker`/`migrate` services of localstack-compose.yml).
# Build from the repository root: docker build -f infra/worker.Dockerfile .
# Target `deploy-tools` adds the Chalice CLI (and so botocore) for localstack_deploy.py; the
# worker image carries only the runtime (requirements.txt, the Lambda package's contents).
FROM python:3.11-slim AS worker

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TE_LOG_FORMAT=json

WORKDIR /app

# Dependencies first, so code changes reuse this layer.
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY app.py ./
COPY chalicelib ./chalicelib
COPY migrations ./migrations

RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin worker
USER 10001

CMD ["python", "-m", "chalicelib.worker"]

FROM worker AS deploy-tools
USER root
COPY requirements-run.txt ./
RUN pip install "$(grep '^chalice==' requirements-run.txt)"
USER 10001
