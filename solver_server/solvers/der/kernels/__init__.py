"""The Discrete Elastic Rods solver's Warp kernels, one module per job: the energy terms (``stretch``,
``bend_twist``), the parallel-transport frames (``frame``), the retraction's bend path (``retraction``), the
line search's per-strand backtracking (``line_search``), continuous collision of rod edges (``ccd``), the
contact solve's Delassus operator and sweeps (``contact``), the system matrix's kinematic rows (``band``), its
Cholesky factor, solves and inverse band (``cholesky``) and the step's objective and gradient (``objective``)."""

from . import band, bend_twist, ccd, cholesky, contact, frame, line_search, objective, retraction, stretch

WARP_MODULES = (contact, stretch, bend_twist, frame, retraction, line_search, ccd, band, cholesky, objective)
