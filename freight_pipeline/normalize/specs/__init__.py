"""Declarations of the ``freight`` tables, one module per domain.

:mod:`freight_pipeline.normalize.tables` is the table of contents: it lists every table in
declaration order (``FREIGHT_TABLES``) and names the tables a shipment document fills; every other
name is imported from the module below that declares it. The naming conventions are in its docstring.

* :mod:`.keys`: the schema name and the key columns shared by many tables;
* :mod:`.shipments`: ``shipments`` and the field groups flattened into it;
* :mod:`.goods`: ``shipment_goods`` and the tables per goods line;
* :mod:`.parties`: shipment addresses and their references, containers and their addresses;
* :mod:`.legs`: carriage legs (embedded, air and sea main carriage);
* :mod:`.events_memos`: shipment events, memo lines, AES proposals, custom fields;
* :mod:`.code_conversions`: EDI code conversion records.
"""
