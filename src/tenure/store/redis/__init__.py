"""The Redis backend: one team spread over many machines (``pip install 'tenure[redis]'``)."""

from tenure.store.redis.backend import RedisStore

__all__ = ["RedisStore"]
