"""The contact surrogate: the contact graph and the network, independent of MuJoCo's stepping.

- ``batch_graph``: the one contact-graph builder (``GraphBuilder``: owned contacts of many ``MjData`` as one graph);
  ``graph``: its fields and the network's nondimensional, invariant features; ``data_views``: the arrays it reads;
- ``law``: the passive contact law (Hunt-Crossley normal force, regularized Coulomb friction) and its
  semi-implicit solve; ``contact_law``: ``ContactLawGNN``, the law with a graph network's bounded corrections
  (contact model v2); ``layers``: the networks' building blocks; ``network_numpy``: the stepper's numpy copy of a
  network for small batches (held to the torch model);
- ``checkpoint``: safetensors weights plus a JSON card, never pickle.

The end-to-end peer (no MuJoCo) is a baseline, outside this package.
"""
