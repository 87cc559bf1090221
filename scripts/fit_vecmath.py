#!/usr/bin/env python3
"""Fits the polynomial coefficients of codegen/cpu/VecMath.cpp and prints them as f32 values.

Needs mpmath (Debian: python3-mpmath). Chebyshev interpolation (near-minimax) for the smooth
remainders of exp, log, tanh and small-|x| erf; a least-squares fit weighted by e^(-x^2) for
erfcx on [1, 4], because erf = 1 - e^(-x^2)*erfcx needs a small absolute error there, not a
small relative one. For each fit it also prints the error left after rounding the coefficients
to f32 (evaluated exactly), which is one part of the error the tests measure.
"""
import struct

from mpmath import chebyfit, cos, erf, erfc, exp, linspace, log, matrix, mp, mpf, pi, polyval
from mpmath import qr_solve, sqrt, tanh

mp.dps = 40


def f32(v):
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def show(name, coeffs, error):
    print(f"{name}: max error with f32 coefficients {float(error):.3g}")
    print("    " + ", ".join(repr(c) for c in coeffs))


def cheb(name, f, lo, hi, degree):
    coeffs = [f32(c) for c in chebyfit(f, [lo, hi], degree + 1)]
    error = max(abs(polyval(coeffs, t) - f(t)) / abs(f(t)) for t in linspace(lo, hi, 2001))
    show(name + " (relative)", coeffs, error)


def limit(f, at):
    return lambda t: f(t) if t != 0 else at


half_ln2 = log(2) / 2
cheb("exp: (e^r - 1 - r)/r^2, r in [-ln2/2, ln2/2]",
     limit(lambda r: (exp(r) - 1 - r) / r**2, mpf(1) / 2), -half_ln2, half_ln2, 5)
cheb("log: (log(1+m) - m + m^2/2)/m^3, m in [sqrt(1/2)-1, sqrt(2)-1]",
     limit(lambda m: (log(1 + m) - m + m**2 / 2) / m**3, mpf(1) / 3), sqrt(mpf(1) / 2) - 1,
     sqrt(2) - 1, 8)
cheb("tanh: (tanh(x) - x)/x^3 in z = x^2, |x| < 0.625",
     limit(lambda z: (tanh(sqrt(z)) - sqrt(z)) / sqrt(z)**3, -mpf(1) / 3), mpf(0),
     mpf(0.625)**2, 5)
two_over_sqrt_pi = 2 / sqrt(pi)
hi = f32(two_over_sqrt_pi)
print(f"erf: 2/sqrt(pi) = {hi!r} + {f32(two_over_sqrt_pi - mpf(hi))!r}")
cheb("erf: (erf(x)/x - 2/sqrt(pi))/x^2 in z = x^2, |x| < 1",
     limit(lambda z: (erf(sqrt(z)) / sqrt(z) - two_over_sqrt_pi) / z, -two_over_sqrt_pi / 3),
     mpf(0), mpf(1), 5)


def erfcx(x):
    return exp(x * x) * erfc(x)


def weighted_fit(f, weight, lo, hi, degree, center, samples=400):
    nodes = [(lo + hi) / 2 + (hi - lo) / 2 * cos(pi * (k + mpf(1) / 2) / samples)
             for k in range(samples)]
    a, b = matrix(samples, degree + 1), matrix(samples, 1)
    for i, x in enumerate(nodes):
        for j in range(degree + 1):
            a[i, j] = weight(x) * (x - center)**(degree - j)
        b[i] = weight(x) * f(x)
    solution, _ = qr_solve(a, b)
    return [f32(solution[j]) for j in range(degree + 1)]


coeffs = weighted_fit(erfcx, lambda x: exp(-x * x), mpf(1), mpf(4), 8, mpf(2))
error = max(abs(exp(-x * x) * (polyval(coeffs, x - 2) - erfcx(x))) for x in linspace(1, 4, 3001))
show("erf: erfcx(x) in x - 2, x in [1, 4] (absolute error of erf)", coeffs, error)
