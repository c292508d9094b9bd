-- One row per EDI code conversion record: the partner's code and the internal code side by side.

with

conversions as (

    select * from {{ ref('stg_code_conversions') }}

),

final as (

    select
        conversion_id,
        partner,
        direction,
        case direction
            when 'I' then 'inbound'
            when 'O' then 'outbound'
        end as direction_name,
        code_table,
        code_type,
        source_code,
        target_code,
        -- inbound: partner code -> internal code; outbound: internal code -> partner code
        case direction
            when 'I' then source_code
            when 'O' then target_code
        end as partner_code,
        case direction
            when 'I' then target_code
            when 'O' then source_code
        end as internal_code,
        description,
        valid_from,
        last_modified_at,
        _synced_at,
        {{ is_in_code_list('direction', freight_conversion_directions()) }} as is_known_direction
    from conversions

)

select * from final
