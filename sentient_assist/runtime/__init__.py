"""What an agent touches: AbstractAgent, ResponseHandler, text streams, hooks, ids, errors,
pauses. Its public names are exported by `sentient_assist` and its public submodules
(`sentient_assist.exceptions`, `sentient_assist.compat`, `sentient_assist.testing`)."""
