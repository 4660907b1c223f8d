"""Drop-ins that put fastagg under agent frameworks (each needs its extra).

- :mod:`fastagg.integrations.adk`: Google ADK (``fastagg[adk]``).
- :mod:`fastagg.integrations.pydantic_ai`: pydantic-ai (``fastagg[pydantic-ai]``).
"""
