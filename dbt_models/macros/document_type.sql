{#
  The kind of an E-File document, from its description and file name (the service has no document
  type field, A38): the first rule that matches, else OTHER. A rule has phrases, matched as substrings
  of the lower-cased text ('invoice' also in "invoices"), and short words, matched whole only: between
  string ends or characters other than a-z and 0-9 (a space, '_', '-', '.', '(', ...), so 'awb' is no
  air waybill in "drawback" nor 'cim' a rail note in "specimen", while "AWB 123-456.pdf", "hawb_12.pdf",
  "MAWB-1.pdf", "CIM.pdf", "(CIM)" and "cmr_note" are. A short word needs every spelling of its own
  (hawb, mawb), since it no longer matches inside another.
#}

{% macro document_type_rules() -%}
    {#- (type, phrases matched anywhere, short words matched whole) -#}
    {{ return([
        ('PROFORMA_INVOICE', ['proforma', 'pro forma', 'pro-forma'], []),
        ('COMMERCIAL_INVOICE', ['commercial invoice', 'commercial_invoice', 'invoice'], []),
        ('PACKING_LIST', ['packing list', 'packing_list'], []),
        ('BILL_OF_LADING', ['bill of lading', 'bill_of_lading'], ['b/l']),
        ('AIR_WAYBILL', ['air waybill', 'air_waybill'], ['awb', 'hawb', 'mawb']),
        ('CMR_NOTE', [], ['cmr']),
        ('RAIL_CONSIGNMENT_NOTE', ['rail consignment'], ['cim']),
        ('CERTIFICATE_OF_ORIGIN', ['certificate of origin', 'certificate_of_origin'], []),
        ('EXPORT_DECLARATION', ['export declaration', 'export_declaration', 'customs declaration'], []),
        ('PHOTO', ['photo'], []),
    ]) }}
{%- endmacro %}


{% macro document_types() -%}
    {%- set types = [] -%}
    {%- for rule in document_type_rules() -%}{%- do types.append(rule[0]) -%}{%- endfor -%}
    {%- do types.append('OTHER') -%}
    {{ return(types) }}
{%- endmacro %}


{% macro document_type(description, file_name) -%}
    {%- set text = "lower(coalesce(" ~ description ~ ", '') || ' ' || coalesce(" ~ file_name ~ ", ''))" -%}
    case
    {%- for type, phrases, words in document_type_rules() %}
        {%- set tests = [] -%}
        {%- for phrase in phrases -%}{%- do tests.append("contains(" ~ text ~ ", '" ~ phrase ~ "')") -%}{%- endfor -%}
        {%- if words -%}
            {%- do tests.append("regexp_matches(" ~ text ~ ", '(^|[^a-z0-9])(" ~ words | join('|') ~ ")($|[^a-z0-9])')") -%}
        {%- endif %}
        when {{ tests | join(' or ') }} then '{{ type }}'
    {%- endfor %}
        else 'OTHER'
    end
{%- endmacro %}


{% macro transport_document_types() -%}
    {{ return(['BILL_OF_LADING', 'AIR_WAYBILL', 'CMR_NOTE', 'RAIL_CONSIGNMENT_NOTE']) }}
{%- endmacro %}
