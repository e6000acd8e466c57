"""The Projective Dynamics solver's Warp kernels, one module per job: the local steps (``local``: cloth
edges, ``triangle``: shear, ``bending``, ``tet``: soft-body strain and volume), the Jacobi/Chebyshev
global solve (``jacobi``), the strain-limit passes (``limit``, ``limit_sweep``) and the contact local step
against contact planes (``contact``)."""

from . import bending, contact, jacobi, limit, limit_sweep, local, tet, triangle

WARP_MODULES = (limit, limit_sweep, local, triangle, bending, tet, jacobi, contact)
