{#
  The kind of an E-File document, from its description and file name (the service has no document
  type field, A38): the first rule that matches (words as substrings of the lower-cased text, so
  short ones carry their delimiters: 'cim_' not 'cim', which "specimen" holds), else OTHER.
#}

{% macro document_type_rules() -%}
    {{ return([
        ('PROFORMA_INVOICE', ['proforma', 'pro forma', 'pro-forma']),
        ('COMMERCIAL_INVOICE', ['commercial invoice', 'commercial_invoice', 'invoice']),
        ('PACKING_LIST', ['packing list', 'packing_list']),
        ('BILL_OF_LADING', ['bill of lading', 'bill_of_lading', 'b/l']),
        ('AIR_WAYBILL', ['air waybill', 'air_waybill', 'awb']),
        ('CMR_NOTE', ['cmr']),
        ('RAIL_CONSIGNMENT_NOTE', ['rail consignment', '(cim)', 'cim_', 'cim ']),
        ('CERTIFICATE_OF_ORIGIN', ['certificate of origin', 'certificate_of_origin']),
        ('EXPORT_DECLARATION', ['export declaration', 'export_declaration', 'customs declaration']),
        ('PHOTO', ['photo']),
    ]) }}
{%- endmacro %}


{% macro document_types() -%}
    {%- set types = [] -%}
    {%- for rule in document_type_rules() -%}{%- do types.append(rule[0]) -%}{%- endfor -%}
    {%- do types.append('OTHER') -%}
    {{ return(types) }}
{%- endmacro %}


{% macro document_type(description, file_name) -%}
    case
    {%- for type, words in document_type_rules() %}
        when {% for word in words -%}
            contains(lower(coalesce({{ description }}, '') || ' ' || coalesce({{ file_name }}, '')), '{{ word }}')
            {%- if not loop.last %} or {% endif -%}
        {%- endfor %} then '{{ type }}'
    {%- endfor %}
        else 'OTHER'
    end
{%- endmacro %}


{% macro transport_document_types() -%}
    {{ return(['BILL_OF_LADING', 'AIR_WAYBILL', 'CMR_NOTE', 'RAIL_CONSIGNMENT_NOTE']) }}
{%- endmacro %}
