// The width-disagreement probe of SPEC §4 and the head deviation of an MHAR
// site: what the routing distributions of slices (or heads) of one query say
// compared with the whole.
//
// At a routing site with sources S_0..S_{N-1} (each [n_tok, d]), query q [d]
// and key-norm weight g [d], per token (SPEC §2.2):
//   ρ_n = rsqrt(mean_k S_{n,k}² + eps)        (over the full width d)
//   K_n = S_n · ρ_n ⊙ g
//   ℓ_n = Σ_k q_k K_{n,k}              α = softmax_n ℓ   (the full-width routing)
//   cut the d coordinates into S contiguous slices of width d/S;
//   ℓ^s_n = Σ_{k ∈ slice s} q_k K_{n,k}   a_s = softmax_n ℓ^s
// Width disagreement of the token: (1/S) Σ_s KL(a_s ‖ α), in nats.
// Head deviation (an MHAR site, H heads = H slices; w_h = a_h is what head h
// reads): w̄ = (1/H) Σ_h w_h, the head consensus, and per head KL(w_h ‖ w̄).
// Both are 0 for a site with one source. Everything is computed in double.
#pragma once
#include "../util/common.h"

// The computations are ops (kernels/ops.h): route_probe_width (the width
// disagreement per token), route_probe_heads (the head deviation per token
// and head) and route_probe_weight_error (the largest |w - a_h| between the
// weights the model's route kernel saved and the probe's recomputation: a
// check that the probe reads the same sources and parameters as the forward
// pass it follows).
// A random query of matched norm: out = z / ‖z‖ · ‖q‖ with z ~ N(0, I),
// separately for each of `blocks` contiguous blocks of width d/blocks (1: the
// whole norm matched; H: each head's norm matched). A zero block stays zero.
void probe_random_query(float *out, const float *q, int d, int blocks, Rng *rng);
