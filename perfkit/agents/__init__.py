"""perfkit for coding agents: ``perfkit mcp``, a Model Context Protocol server over stdio (:mod:`.server`)
whose tools (:mod:`.tools`) call the analyses the commands of the same name call, on traces opened under the
folders it was started with (:mod:`.roots`) and held by handle (:mod:`.handles`); every reply is bounded
(:mod:`perfkit.report.bounded`)."""
