"""The built-in agents, shipped with the package and registered as entry points of the group
`sentient_assist.agents` (pyproject.toml): `assist serve` in an empty folder serves `showcase`,
and a file of the same name in ./agents wins over any of them."""
