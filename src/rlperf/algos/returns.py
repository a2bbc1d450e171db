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


def q_lambda_returns(
    rewards_TN: torch.Tensor,
    max_q_TN: torch.Tensor,
    dones_TN: torch.Tensor,
    next_max_q_N: torch.Tensor,
    gamma: float,
    q_lambda: float,
    truncation_values_TN: torch.Tensor | None = None,
) -> torch.Tensor:
    """Peng's Q(lambda) returns over a rollout, PQN's regression targets (Gallici et al.
    2024, eq. 4 and Algorithm 1), with ``max_q_TN[t] = max_a Q(s_t, a)``:

        G_t = r_t + gamma * B_t + gamma * (1 - d_t) * ((1 - lambda) * max_a Q(s_{t+1}, a) + lambda * G_{t+1})

    and ``G_T`` bootstrapped from ``next_max_q_N`` = max_a Q(s_T, a). A real episode end
    keeps r_t alone; where a step limit cut the episode, ``B_t`` (``truncation_values_TN``)
    is max_a Q of its final observation, so the cut-off future is still bootstrapped
    (the paper's code treats a truncation as an end).

    This is the TD(lambda) return of :func:`gae` with V(s) = max_a Q(s, a): expanding G_t =
    A_t + V(s_t) in GAE's recursion gives the line above, so the same loop computes both.
    """
    _, returns = gae(
        rewards_TN, max_q_TN, dones_TN, next_max_q_N, gamma, q_lambda, truncation_values_TN
    )
    return returns


def vtrace(
    behaviour_logprobs_TN: torch.Tensor,
    target_logprobs_TN: torch.Tensor,
    rewards_TN: torch.Tensor,
    values_TN: torch.Tensor,
    dones_TN: torch.Tensor,
    next_value_N: torch.Tensor,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    truncation_values_TN: torch.Tensor | None = None,
    lambda_: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace value targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA, sec. 4).

    The data were collected by a behaviour policy mu; the learner's policy is pi (the target)
    and V its value function. With the truncated importance weights

        rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t))
        c_i   = lambda * min(c_bar, pi(a_i|x_i) / mu(a_i|x_i))

    (lambda folded into c as in the paper's remark in sec. 4.1, like Retrace(lambda); lambda = 1
    is plain V-trace), the n-step V-trace target of V(x_s) is eq. (1):

        v_s = V(x_s) + sum_{t=s}^{s+n-1} gamma^{t-s} (prod_{i=s}^{t-1} c_i) delta_t V
        delta_t V = rho_t (r_t + gamma V(x_{t+1}) - V(x_t))

    with n reaching to the end of the rollout, where V(x_T) = ``next_value_N`` bootstraps.
    It is computed backwards with the recursion of the paper's Remark 1,

        v_s = V(x_s) + delta_s V + gamma c_s (v_{s+1} - V(x_{s+1})),

    and the policy-gradient advantage of sec. 4.2 (the actor-critic update direction
    rho_s grad log pi(a_s|x_s) (r_s + gamma v_{s+1} - V(x_s))) is

        A_s = rho_s (r_s + gamma v_{s+1} - V(x_s)),   v_T = V(x_T).

    Episode ends: where ``dones_TN[t]`` is set, x_{t+1} belongs to the next episode, so both
    the bootstrap V(x_{t+1}) (and v_{t+1} in A_t) and the trace (c_t) are cut to zero. Where a
    step limit cut the episode, ``truncation_values_TN[t]`` (the value of the final observation,
    0 elsewhere) takes the bootstrap's place, exactly as in :func:`gae`; the final observation
    ends the trajectory, so its V-trace target is its value.

    The paper assumes rho_bar >= c_bar: rho_bar fixes which policy's value v_s estimates
    (pi for rho_bar = inf, closer to mu as it shrinks), c_bar only the speed of contraction
    (variance). ``math.inf`` disables a truncation.

    Everything is computed without gradients: v_s and A_s are regression targets and fixed
    advantage weights (the paper's gradients flow only through log pi and V in the loss), so
    the outputs never carry autograd history even when the inputs do.

    With target == behaviour and rho_bar = c_bar = 1, all weights are 1 and v_s is the n-step
    (TD(lambda)) return: exactly ``gae(..., gae_lambda=lambda_)`` returns, and for lambda = 1
    A_s equals the GAE(1) advantage.

    Returns (vs_TN, pg_advantages_TN), in the dtype of ``rewards_TN``.
    """
    with torch.no_grad():
        dtype = rewards_TN.dtype
        T = rewards_TN.shape[0]
        ratios = (target_logprobs_TN.detach() - behaviour_logprobs_TN.detach()).to(dtype).exp()
        rhos = ratios.clamp(max=rho_bar)
        cs = lambda_ * ratios.clamp(max=c_bar)
        done = dones_TN.detach().to(torch.bool)
        not_done = (~done).to(dtype)
        values = values_TN.detach().to(dtype)
        next_value = next_value_N.detach().to(dtype)
        truncation = (
            torch.zeros_like(values)
            if truncation_values_TN is None
            else truncation_values_TN.detach().to(dtype)
        )

        next_values = torch.cat([values[1:], next_value.unsqueeze(0)], dim=0)
        deltas = rhos * (
            rewards_TN.detach() + gamma * (next_values * not_done + truncation) - values
        )
        # where() rather than a product with not_done: with c_bar = inf an infinite ratio
        # times 0 would be nan instead of a cut trace.
        traces = torch.where(done, torch.zeros_like(cs), gamma * cs)
        vs_minus_v = torch.empty_like(deltas)
        running = torch.zeros_like(deltas[0])
        # Backwards in time like gae; T is short, the N axis is vectorised.
        for t in range(T - 1, -1, -1):
            running = deltas[t] + traces[t] * running
            vs_minus_v[t] = running
        vs = values + vs_minus_v

        next_vs = torch.cat([vs[1:], next_value.unsqueeze(0)], dim=0)
        pg_advantages = rhos * (
            rewards_TN.detach() + gamma * (next_vs * not_done + truncation) - values
        )
    return vs, pg_advantages
