"""Training contact models on rollouts through the differentiable twin (windows, objective, Lightning, the staged fit)."""
