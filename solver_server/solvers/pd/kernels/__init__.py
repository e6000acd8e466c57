"""The Projective Dynamics solver's Warp kernels, one module per job: the local steps (``local``: cloth
edges, ``triangle``: shear, ``bending``, ``tet``: soft-body strain and volume), the Jacobi/Chebyshev
global solve (``jacobi``) and the strain-limit passes (``limit``, ``limit_sweep``)."""

from . import bending, jacobi, limit, limit_sweep, local, tet, triangle

WARP_MODULES = (limit, limit_sweep, local, triangle, bending, tet, jacobi)
