"""Tool-calling tasks (paper App. C, Table 7): a seeded service in the container, reached as MCP tools.

``seeds/`` (four tasks), ``instructions/`` (the proposer's: task format, what to build, the kit),
``kit/`` (the standard-library MCP server and client every seed carries), ``checks.py`` (admission
checks on the service's state dumps). The agent side is :mod:`aes.agents.mcp`.
"""
