"""The Discrete Elastic Rods solver's Warp kernels, one module per job: the energy terms (``stretch``,
``bend_twist``), the parallel-transport frames (``frame``), the retraction's bend path (``retraction``),
continuous collision of rod edges (``ccd``) and the contact solve's Delassus operator and sweeps
(``contact``)."""

from . import bend_twist, ccd, contact, frame, retraction, stretch

WARP_MODULES = (contact, stretch, bend_twist, frame, retraction, ccd)
