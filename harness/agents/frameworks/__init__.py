"""Agents built on real agent frameworks (LangGraph, the OpenAI Agents SDK, pydantic-ai), each driven by a
scripted fake model (no network), each in a correct version and with the framework's common wrong retry
setting (``--wrong``). docs/frameworks.md says how each is built and what each framework's retry does.

    python -m harness.agents.frameworks.langgraph_agent [--wrong]
    python -m harness.agents.frameworks.openai_agents_agent [--wrong]
    python -m harness.agents.frameworks.pydantic_ai_agent [--wrong] [--trace]
    python -m harness.agents.frameworks.pydantic_ai_mcp_agent [--wrong]      # pydantic-ai's own MCPToolset
    python -m harness.agents.frameworks.openai_agents_mcp_agent [--wrong]    # the SDK's MCPServerStreamableHttp
    python -m harness.agents.frameworks.langchain_mcp_agent [--wrong]        # langchain-mcp-adapters under LangGraph

Their tool calls the destination of each intent: an HTTP service (requests, logged by harness.instrument)
or an MCP tool server (the mcp client, logged by mcp_tools.py); ``--trace`` logs OpenTelemetry spans only. The
``*_mcp_agent``s call the MCP server's own tools through the framework's MCP adapter (mcp_adapters.py).

The frameworks come from the ``frameworks`` extra; only the modules of this package import them.
"""
