# The app image of docker-compose.yml: driver, producer and netcat demo.
# Built on the cluster's own Spark image, because the driver's PySpark must be exactly the
# cluster's Spark version. SPARK_VERSION is the one place to change it; docker-compose.yml's
# spark-master and spark-worker image must carry the same tag (tests/unit/test_compose.py).
ARG SPARK_VERSION=4.1.2
FROM apache/spark:${SPARK_VERSION}-scala2.13-java17-python3-ubuntu
ARG SPARK_VERSION

USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends netcat-openbsd \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# pyspark first, pinned to the image's Spark: setup.cfg accepts any 4.x, and pip would
# otherwise take the newest. (The JVM is the image's: SPARK_HOME stays /opt/spark.)
RUN python3 -m pip install --no-cache-dir "pyspark==${SPARK_VERSION}"
COPY . /app
# Executors run the plain Spark image: they get the app and kafka-python from this zip,
# which the app service hands to Spark with --py-files.
RUN python3 -m pip install --no-cache-dir /app \
    && mkdir -p /app/dist \
    && python3 -m zipfile -c /app/dist/streaming_app-pyfiles.zip \
        "$(python3 -c 'import os, streaming_app; print(os.path.dirname(streaming_app.__file__))')" \
        "$(python3 -c 'import os, kafka; print(os.path.dirname(kafka.__file__))')"

# A new named volume takes the owner of the directory it is mounted on: user spark, the
# uid (185) that the worker's executors run as too, so both can write the checkpoint.
RUN mkdir -p /data && chown spark:spark /data
# The same for the volume of the cluster's secret (docker-compose.yml's spark-secret),
# which only the spark user may read.
RUN mkdir -p /run/spark-secret && chown spark:spark /run/spark-secret && chmod 700 /run/spark-secret

# Spark settings and quiet logging of conf/ (spark-defaults.conf, log4j2.properties).
ENV SPARK_CONF_DIR=/app/conf
USER spark
CMD ["streaming-app", "--help"]
