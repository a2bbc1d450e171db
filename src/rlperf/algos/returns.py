"""Return and advantage estimators: pure functions of tensors, no state.

Shape convention: ``_TN`` = (time, envs). ``dones_TN[t]`` marks that the transition at step t
ended its episode, so nothing after it may be bootstrapped into step t.
"""

from __future__ import annotations

import torch


def gae(
    rewards_TN: torch.Tensor,
    values_TN: torch.Tensor,
    dones_TN: torch.Tensor,
    next_value_N: torch.Tensor,
    gamma: float,
    gae_lambda: float,
    truncation_values_TN: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized Advantage Estimation (Schulman et al. 2016, eq. 16).

    delta_t = r_t + gamma * (V(s_{t+1}) * (1 - d_t) + B_t) - V(s_t)
    A_t     = delta_t + gamma * lambda * (1 - d_t) * A_{t+1}

    ``B_t`` (``truncation_values_TN``) is the value of the final observation where a step
    limit cut the episode at step t (0 elsewhere): the recursion stops there like at a real
    end, but the cut-off future is still bootstrapped (Pardo et al. 2018).

    Returns (advantages_TN, returns_TN) with returns = advantages + values (the value
    targets, TD(lambda) returns).
    """
    T = rewards_TN.shape[0]
    not_done = 1.0 - dones_TN.to(rewards_TN.dtype)
    next_values = torch.cat([values_TN[1:], next_value_N.unsqueeze(0)], dim=0)
    bootstrap = next_values * not_done
    if truncation_values_TN is not None:
        bootstrap = bootstrap + truncation_values_TN
    deltas = rewards_TN + gamma * bootstrap - values_TN
    discounts = gamma * gae_lambda * not_done
    advantages = torch.empty_like(deltas)
    running = torch.zeros_like(deltas[0])
    # The recursion runs backwards in time; T is short (hundreds), the N axis is vectorised.
    for t in range(T - 1, -1, -1):
        running = deltas[t] + discounts[t] * running
        advantages[t] = running
    return advantages, advantages + values_TN
