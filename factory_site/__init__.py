"""The Django site of the Factory event runtime.

``__version__`` is the product's version, in one place (semantic versioning; CHANGELOG.md
says what each one changed). The settings carry it as ``PRODUCT_VERSION``, which the other
layers read: ``runserve --version``, ``GET /status``'s ``version``, the OpenAPI document's
``info.version``, ``/metrics``' ``factory_build_info`` and the admin's footer.
"""

__version__ = "0.9.0"
