"""Calling the model: the client and its retries, the request as sent, the response as validated, streamed
answers, the HTTP transports, and the shared connection pools.
"""
