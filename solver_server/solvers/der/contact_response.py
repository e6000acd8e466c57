"""The local response of DER contacts (seed 000 §3.2, Algorithm 3's local step): the 3×3 matrix K of every
contact with Δu = K λ, the relative velocity an impulse λ produces.

* "rigid_rod" (seed eq. 3.3): the rods of an edge–edge contact are rigid bodies with K = δ/m + [l]ₓᵀ I⁻¹ [l]ₓ
  (I = m|e|²/12 about the centre; rods with a clamped end pivot about it, K = 3α²/m (δ − t tᵀ)), a vertex is a
  point mass (K = δ/m); masses are divided by the number of active contacts of each vertex (seed §3.2.3).
* "delassus": the exact response W_cc = J_c A⁻¹ J_cᵀ of the factorized global system, from the band of A⁻¹,
  scaled for the Jacobi iteration by the coupling to the other active contacts.
"""

from __future__ import annotations

import numpy as np

from ...backend import repeat_each
from ...kernels import cuda_layout_on, warp_device_of
from .contact_set import ContactSet, normalize


class LocalResponse:
    """Responses of one step's contacts (``set_contacts``) on the current factor of the global matrix
    (``set_factor``; None: rigid rods only). ``kind``: "rigid_rod" or "delassus"; dof_fixed (n_dofs,) and
    vertex_fixed (N,) bool mark the kinematic DOFs and vertices. The band of A⁻¹ is kept per factor, the
    Delassus blocks per factor and contact set, the coupled contact pairs per contact set."""

    def __init__(self, xp, model, kind: str, dof_fixed, vertex_fixed):
        self.xp, self.model, self.kind = xp, model, kind
        self.dof_fixed, self.vertex_fixed = dof_fixed, vertex_fixed
        self.contacts = ContactSet.empty(xp)
        self._factor = None
        self._inverse_band = None
        self._delassus = None
        self._coupled_pairs = None

    def set_factor(self, factor) -> None:
        self._factor = factor
        self._inverse_band = None
        self._delassus = None

    def set_contacts(self, contacts: ContactSet) -> None:
        self.contacts = contacts
        self._coupled_pairs = self._delassus = None

    def response(self, active_mask, end_positions):
        """Per-contact 3×3 response (n, 3, 3): Δu = K λ, with the active-contact count correction; active_mask
        (n,) bool: the contacts that carry an impulse; end_positions (N, 3) [m]: the step's predicted ends."""
        if self.kind == "delassus" and self._factor is not None:
            return self._delassus_response(active_mask, end_positions)
        return self.rigid_rod(self._contact_counts(active_mask), end_positions)

    def _inverse_entries(self, rows, cols):
        """Entries (A⁻¹)_{rows, cols} from its band; 0 outside the band (far apart on a strand or two strands)."""
        xp = self.xp
        if self._inverse_band is None:
            self._inverse_band = self._inverse_band_of_touched_strands()
        band = self._inverse_band
        p = band.shape[0] - 1
        lower, upper = xp.maximum(rows, cols), xp.minimum(rows, cols)
        offset = lower - upper
        # kinematic DOFs do not respond (their identity rows in A would otherwise contribute 1)
        inside = (offset <= p) & ~self.dof_fixed[rows] & ~self.dof_fixed[cols]
        return xp.where(inside, band[xp.minimum(offset, p), upper], 0.0)

    def _inverse_band_of_touched_strands(self):
        """Band of A⁻¹ (p+1, n_dofs).  A is block diagonal over strands, so each strand's block of A⁻¹ comes
        from its own factor columns.  On the kernel path (device) every strand's block is computed (no
        data-sized selection, nothing leaves the device); with a LAPACK factor (numpy) only the strands that
        carry a contact (zero elsewhere)."""
        factor = self._factor
        if factor.on_kernel_path:
            return factor.inverse_band()
        model = self.model
        touched = np.zeros(model.n_strands, dtype=bool)
        touched[model.vertex_strand[self.contacts.vertices[self.contacts.weights != 0.0]]] = True
        return factor.inverse_band(selected=touched)

    def _coupling(self, first, second):
        """Delassus blocks W_{c c'} = J_c A⁻¹ J_{c'}ᵀ (m, 3, 3) for contact index pairs (first, second)."""
        xp, model = self.xp, self.model
        dofs_first = model.vertex_dof[self.contacts.vertices[first]][:, :, None] + xp.arange(3)     # (m, 4, 3)
        dofs_second = model.vertex_dof[self.contacts.vertices[second]][:, :, None] + xp.arange(3)
        rows, cols = xp.broadcast_arrays(dofs_first[:, :, None, :, None], dofs_second[:, None, :, None, :])
        weights = self.contacts.weights
        pair_weights = weights[first][:, :, None] * weights[second][:, None, :]     # (m, 4, 4)
        return xp.einsum("nkl,nklab->nab", pair_weights, self._inverse_entries(rows, cols))

    def _neighbour_pairs(self):
        """Pairs (c, c') of contacts with a vertex within ±2 of each other on one strand (c ≠ c')."""
        xp, model = self.xp, self.model
        touched = self.contacts.weights != 0.0
        contact, slot = xp.nonzero(touched)
        vertex = self.contacts.vertices[contact, slot]
        order = xp.argsort(vertex, kind="stable")
        contact, vertex = contact[order], vertex[order]
        pairs = []
        for shift in range(-2, 3):  # the five vertex offsets that share band entries
            target = vertex + shift
            lo = xp.searchsorted(vertex, target, side="left")
            hi = xp.searchsorted(vertex, target, side="right")
            count = hi - lo
            if int(count.sum()) == 0:
                continue
            owner = repeat_each(xp, xp.arange(vertex.shape[0]), count)
            partner = lo[owner] + (xp.arange(owner.shape[0]) - (xp.cumsum(count) - count)[owner])
            same_strand = model.vertex_strand[vertex[owner]] == model.vertex_strand[vertex[partner]]
            pairs.append(xp.stack((contact[owner], contact[partner]), axis=1)[same_strand])
        if not pairs:
            return xp.zeros((0, 2), dtype=xp.int64)
        pairs = xp.unique(xp.concatenate(pairs), axis=0)
        return pairs[pairs[:, 0] != pairs[:, 1]]

    def _delassus_response(self, active_mask, end_positions):
        """W_cc = J_c A⁻¹ J_cᵀ from the band of A⁻¹, scaled for the Jacobi iteration (the Delassus
        generalisation of the seed's division of masses by the number of contacts, §3.2.3):

        * by 1 + Σ_{c'} ‖W_{cc'}‖ / ‖W_cc‖ over the active contacts c' coupled to c through the band;
        * along each touched strand's axis t, by the number of active contacts on that strand: stretching
          makes a strand move axially almost as one body, so every contact on it shares the axial response
          (without this, friction along the strand overshoots by that number and oscillates).

        The blocks depend on the contact set and the factor: computed again after every refactorization
        (set_system); the coupled pairs depend on the contact set only and are kept for the step."""
        xp, model = self.xp, self.model
        n = self.contacts.vertices.shape[0]
        if self._delassus is None:
            everyone = xp.arange(n)
            own = self._coupling(everyone, everyone)
            if self._coupled_pairs is None:
                self._coupled_pairs = self._neighbour_pairs()
            pairs = self._coupled_pairs
            coupling = xp.linalg.norm(self._coupling(pairs[:, 0], pairs[:, 1]), axis=(1, 2)) if pairs.shape[0] \
                else xp.zeros(0)
            self._delassus = (own, pairs, coupling / xp.maximum(xp.linalg.norm(own, axis=(1, 2))[pairs[:, 0]], 1e-300),
                              self._strand_axes(end_positions))
        own, pairs, relative_coupling, (strands, axes) = self._delassus
        active_partner = active_mask[pairs[:, 1]]
        scale = 1.0 + xp.bincount(pairs[:, 0], weights=relative_coupling * active_partner, minlength=n)
        response = own * scale[:, None, None]
        on_strand = xp.bincount(strands[:, 0][active_mask], minlength=model.n_strands) \
            + xp.bincount(strands[:, 1][active_mask & self.contacts.kind_edge], minlength=model.n_strands)
        for side in (0, 1):
            axis = axes[:, side]
            extra = xp.maximum(on_strand[strands[:, side]] - scale, 0.0)
            if side == 1:
                extra = xp.where(self.contacts.kind_edge, extra, 0.0)
            axial = xp.einsum("ni,nij,nj->n", axis, own, axis)
            response = response + (extra * axial)[:, None, None] * axis[:, :, None] * axis[:, None, :]
        return response

    def _strand_axes(self, end_positions):
        """Strand index (n, 2) and unit strand direction (n, 2, 3) at each side of every contact."""
        xp, model = self.xp, self.model
        x = end_positions
        axes, strands = [], []
        for first in (0, 2):
            a, b = self.contacts.vertices[:, first], self.contacts.vertices[:, first + 1]
            point = ~self.contacts.kind_edge if first == 0 else xp.zeros(a.shape[0], dtype=bool)
            # a vertex contact uses the chord through its neighbours inside the strand
            strand = model.vertex_strand[a]
            lo = xp.maximum(a - 1, model.strand_offsets[strand])
            hi = xp.minimum(a + 1, model.strand_offsets[strand + 1] - 1)
            a = xp.where(point, lo, a)
            b = xp.where(point, hi, b)
            axes.append(normalize(xp, x[b] - x[a]))
            strands.append(strand)
        return xp.stack(strands, axis=1), xp.stack(axes, axis=1)

    def rigid_rod(self, contact_counts, end_positions):
        """The seed's response (§3.2): each edge a rigid rod, a vertex a point mass, masses divided by
        ``contact_counts`` (N,); end_positions (N, 3) [m] give the rods' directions."""
        xp, model = self.xp, self.model
        eye = xp.eye(3)[None]
        vertices = self.contacts.vertices
        mass = model.vertex_mass[vertices] / contact_counts[vertices]   # (n, 4), seed §3.2.3
        fixed = self.vertex_fixed[self.contacts.vertices]
        total = xp.zeros((self.contacts.vertices.shape[0], 3, 3))
        # point contacts (a vertex, or a point of a rod edge, against a collider): K = Σ w²/m δ over its free slots
        point = ~self.contacts.kind_edge
        compliance = xp.where(fixed[:, :2], 0.0, self.contacts.weights[:, :2] ** 2 / mass[:, :2]).sum(axis=1)
        total = xp.where(point[:, None, None], eye * compliance[:, None, None], total)
        edge = self.contacts.kind_edge
        if cuda_layout_on(warp_device_of(total)):
            # on the device every row is computed and the edge rows kept: no read of which rows they are
            rows, on_edge = slice(None), edge[:, None, None]
        else:
            if not bool(edge.any()):
                return total
            rows, on_edge = xp.nonzero(edge)[0], True
        for side in (0, 2):  # rod A uses slots 0-1, rod B slots 2-3
            first, second = self.contacts.vertices[rows, side], self.contacts.vertices[rows, side + 1]
            alpha = xp.abs(self.contacts.weights[rows, side + 1])
            rod_mass = 0.5 * (mass[rows, side] + mass[rows, side + 1])
            tangent = normalize(xp, end_positions[second] - end_positions[first])
            lateral = eye - tangent[:, :, None] * tangent[:, None, :]
            fixed_first, fixed_second = fixed[rows, side], fixed[rows, side + 1]
            free = eye / rod_mass[:, None, None] + (12.0 * (alpha - 0.5) ** 2 / rod_mass)[:, None, None] * lateral
            arm = xp.where(fixed_first, alpha, 1.0 - alpha)
            pivot = (3.0 * arm * arm / rod_mass)[:, None, None] * lateral
            k = xp.where((fixed_first | fixed_second)[:, None, None], pivot, free)
            k = xp.where((fixed_first & fixed_second)[:, None, None], 0.0, k)
            total[rows] = xp.where(on_edge, total[rows] + k, total[rows])
        return total

    def _contact_counts(self, active_mask):
        """Active contacts per vertex (seed §3.2.3: masses are divided by it in the rigid-rod response)."""
        xp, model = self.xp, self.model
        touching = self.contacts.vertices[active_mask]
        weights = self.contacts.weights[active_mask] != 0.0
        counts = xp.bincount(touching[weights], minlength=model.n_vertices).astype(float)
        return xp.maximum(counts, 1.0)
